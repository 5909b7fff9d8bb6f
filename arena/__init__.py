"""The ``arena`` command line: a thin dispatcher over the subcommands each package registers."""
