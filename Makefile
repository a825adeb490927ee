.PHONY: test lint bench
test:
	pytest
lint:
	ruff check synestra_cli tests benchmarks
	mypy synestra_cli
bench:
	python benchmarks/run.py
