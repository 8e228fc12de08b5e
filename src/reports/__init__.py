"""Gate reports (JSON, Markdown, JUnit XML, HTML) and the verified gate ceiling."""
