from clusterkit.cli.main import main

main()
