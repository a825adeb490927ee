.PHONY: test fast test-all lint docs bench demo
test:
	pytest
# the tier to run on every change (under 5 min on 2 cores): no matrices, no simulations, no subprocess storms
fast:
	pytest -m "not (heavy or truth or slow or campus)"
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
demo:
	python scripts/readme_demo.py
