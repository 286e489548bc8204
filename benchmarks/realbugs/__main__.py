from benchmarks.realbugs.run import main

raise SystemExit(main())
