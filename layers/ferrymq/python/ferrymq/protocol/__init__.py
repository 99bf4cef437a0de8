"""SQS's wire protocols: parsing requests (AWS JSON 1.0 and query), rendering results and errors, and MD5s."""
