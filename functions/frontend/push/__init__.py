"""The push service (docs/design/push-delivery.md): hosts pollers for the event-source mappings it holds leases on,
receiving, delivering and deleting through the front end's own SQS action handlers."""
