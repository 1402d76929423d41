"""The server's parts: the heavy-job queue, warm-up, shareable links, shared mode and its operator settings."""
