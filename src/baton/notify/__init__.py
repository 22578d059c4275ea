"""Notification channels through apprise: email, Telegram, Slack, Discord and generic JSON webhooks."""
