-- psql 15: \df
SELECT n.nspname as "Schema",
	  p.proname as "Name",
	  pg_catalog.pg_get_function_result(p.oid) as "Result data type",
	  pg_catalog.pg_get_function_arguments(p.oid) as "Argument data types",
	 CASE p.prokind
	  WHEN 'a' THEN 'agg'
	  WHEN 'w' THEN 'window'
	  WHEN 'p' THEN 'proc'
	  ELSE 'func'
	 END as "Type"
	FROM pg_catalog.pg_proc p
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
	WHERE pg_catalog.pg_function_is_visible(p.oid)
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	ORDER BY 1, 2, 4;
