.PHONY: test lint bench demo
test:
	pytest
lint:
	ruff check synestra_cli tests benchmarks scripts
	mypy synestra_cli
bench:
	python benchmarks/run.py
demo:
	python scripts/readme_demo.py
