from honestscale.cli import main

main()
