"""Server-side encryption of message bodies and attributes: the stored envelope (:mod:`.envelope`) and the data
keys behind it (:mod:`.data_keys`), generated and unwrapped through KMS (:mod:`ferrymq.aws.kms`).  The design
note is docs/design/sse.md."""
