from gitguard.cli import main

main()
