"""`tunelab plan`: a 3, 7 or 30 day rental laid out in phases from what the lab has measured."""
