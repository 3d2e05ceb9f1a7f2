"""What every command's arguments share, beneath the entry point: the argument types that turn a bad
value into a one-line error (exit 2), the flags several commands take, and the settings file that
gives their defaults."""
