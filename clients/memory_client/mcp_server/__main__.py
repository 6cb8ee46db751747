from memory_client.mcp_server.cli import main

main()
