"""`tunelab report`: one static, self-contained HTML page of the lab, drawn from its records."""
