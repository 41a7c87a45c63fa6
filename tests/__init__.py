"""The test suite, a package: test modules and their helpers are imported one way,
`from tests.<module> import ...`, so no module loads twice under two names."""
