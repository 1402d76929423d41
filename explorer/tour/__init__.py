"""The guided tour: its steps (data), measured facts, the banner, the quiz."""
