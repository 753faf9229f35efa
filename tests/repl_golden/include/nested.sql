-- \ir finds this file next to part.sql
SELECT 'nested' AS whence;
