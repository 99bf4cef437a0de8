"""Pure DataFrame -> DataFrame transforms: no I/O, no session building; what the tests run on small frames."""
