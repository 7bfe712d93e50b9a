"""Helpers shared by the test suites, imported as `tests.helpers.<module>`.

commands: git and the gitguard CLI in a subprocess; paths: the repository root and the
shared fixtures; gitstate: the user's git state gitguard must never change; daemons: a real
daemon process; hooks: hook installs, payloads and bare remotes; crashkit: scratch
repositories and fault points for the crash suites; rollback, storage, trees: small helpers
of those suites; realfiles: real source files from installed packages; filekeyring: a
keyring backend for subprocesses.
"""
