.PHONY: test test-all lint docs bench
test:
	pytest
test-all:
	pytest -m ""
lint:
	ruff check .
	mypy
	lint-imports
	python scripts/gen_cli_docs.py --check
docs:
	python scripts/gen_cli_docs.py
bench:
	python benchmarks/run.py
