SELECT 'unfinished' AS u
