from memory_server.main import cli

if __name__ == "__main__":  # not when a spawned worker process imports it
    cli()
