from memory_server.main import cli

cli()
