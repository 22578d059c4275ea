"""Deciding from chat: Slack buttons and Telegram inline keyboards answered under a named person."""
