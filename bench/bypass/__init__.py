"""The bypass fuzzer (`python -m bench bypass`, docs/design/testenv.md "The bypass fuzzer")."""
