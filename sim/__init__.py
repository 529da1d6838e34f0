"""Models and analysis: no GUI imports (Qt, VisPy) here."""
