from mobiperf.cli import main

main()
