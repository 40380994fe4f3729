"""Data the stages exchange and keep: the results schema and its atomic
Parquet I/O (``results``, columns derived from the family registry), and the
blogs' published numbers (``published.csv``, ``blog_*``) the report compares with.
"""
