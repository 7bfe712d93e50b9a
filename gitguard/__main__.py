from gitguard.entry import main

main()
