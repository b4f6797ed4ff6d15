"""pytest support: the plugin (labs as fixtures, exercise files as tests) and its parts."""
