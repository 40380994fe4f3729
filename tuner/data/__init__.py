"""Data the stages exchange and keep: where each file of a results folder
lies (``paths``), the results schema and its atomic Parquet I/O (``results``,
columns from the run's families), the rows the report and the profile pick
(``selection``), and the blogs' published numbers and tables (``published.csv``,
``blog_*``) the report compares with.
"""
