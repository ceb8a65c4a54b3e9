from pkagent.cli import main

main()
