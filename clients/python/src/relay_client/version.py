"""The version this client reports in its User-Agent."""

VERSION = "0.1.0"
