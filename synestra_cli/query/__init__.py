"""Small read-only questions to the store: jobs and attempts (`jobs`), which cluster a job id belongs
to (`clusters`), and the guarded SQL console (`inspect`)."""
