// placeholder source for the manifest tests: never compiled
