"""The service's own browser tracker (tracker.js), served by the service: docs/browser.md."""
