"""Results kept in the store so that the next report does not compute them again: each job's explanation
(`explanations`) and its accounting (`taxes`), filed under one key made of the store's sources and the
running code (`explanations.store_key`), so that what is kept is either current or ignored, never stale.
Where they are kept is the store's business (store/door.py): a store file's tables, or beside a lake's
parts."""
