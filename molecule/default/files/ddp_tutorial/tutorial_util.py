"""A second file of the tutorial's directory: the script imports it from beside itself."""
STEPS = 20
