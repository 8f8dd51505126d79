"""The human output of each command family (rich tables); nothing below this package prints."""
