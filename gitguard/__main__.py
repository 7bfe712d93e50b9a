from gitguard.cli.entry import main

main()
