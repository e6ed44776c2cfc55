"""A minimal sweeper that uses the jobs' return values (the launcher's tests)."""
