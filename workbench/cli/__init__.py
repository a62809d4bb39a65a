"""`workbench` entry points; headless commands import the core only."""
