from kafkactl.cli.app import main

main()
