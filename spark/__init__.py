"""PySpark jobs over the usage records: billing, queue analytics and a report.

``jobs/*.py`` are thin ``spark-submit`` entries; ``transforms/`` holds the pure DataFrame -> DataFrame
functions; ``io.py`` reads and writes S3 (natively where Hadoop has a filesystem for it, as on EMR, otherwise
through the ``ferrymq_s3`` Python Data Source over boto3, see ``datasource.py``).
"""
