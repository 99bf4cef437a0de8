"""Push delivery: event-source mappings that deliver a queue's messages to Lambda functions and HTTP endpoints
(docs/design/push-delivery.md). What both the front end and the push service need lives here: the mapping's
configuration and Lambda's rules for it, its errors, filter patterns and the HTTP signature."""
