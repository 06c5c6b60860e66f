"""The store layer: the databases tw keeps on disk (opening, locking, migrating, checking and
writing them), below everything that reads them.  Imports core only: what a stored record
must hold and what it means is the caller's (analyse), never the store's."""
