"""The command line: the parsers and their flags, argument types, the settings file, the entry point
and the browser view (`gpudash serve`)."""
