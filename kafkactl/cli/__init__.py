"""The one Typer app; one thin module per subcommand (see app.py)."""
