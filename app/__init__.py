"""Qt application: windows, widgets and the command line (app/commands)."""
